//! `--auth-file` on the real `musterd` binary: a bad file stops startup with its line; SIGHUP
//! with a broken file is refused and the old rules stay; SIGHUP with a good file admits new
//! tokens and refuses removed ones (58, connection closed) while a removed principal's open
//! connection stays open but is denied (30) at its next request; the WARN an open server on a
//! non-loopback address logs; repeated failed Hellos from one address are slowed down; the
//! failures show on /metrics.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use muster_auth::TokenHash;
use muster_protocol::*;

/// Every line musterd writes to stderr, as it writes them.
type Log = Arc<Mutex<Vec<String>>>;

/// A musterd process, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    admin: Option<SocketAddr>,
    log: Log,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts musterd with `args` (which name `--listen`) and waits for "musterd listening".
    fn start(data_dir: &Path, args: &[&str]) -> Result<Server> {
        let (mut child, log) = spawn(data_dir, args)?;
        let started = Instant::now();
        loop {
            let listening = log
                .lock()
                .expect("log lock")
                .iter()
                .find(|l| l.contains("musterd listening"))
                .cloned();
            if let Some(line) = listening {
                let field = |name: &str| {
                    line.split_whitespace()
                        .find_map(|w| w.strip_prefix(name))
                        .map(str::to_owned)
                };
                let addr = field("local_addr=").context("local_addr")?.parse()?;
                let admin = field("admin_addr=").and_then(|a| a.parse().ok());
                return Ok(Server {
                    child,
                    addr,
                    admin,
                    log,
                });
            }
            if started.elapsed() > Duration::from_secs(20) || child.try_wait()?.is_some() {
                let _ = child.kill();
                let _ = child.wait();
                bail!("musterd did not start: {:?}", log.lock().expect("log lock"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn lines_with(&self, words: &[&str]) -> Vec<String> {
        self.log
            .lock()
            .expect("log lock")
            .iter()
            .filter(|l| words.iter().all(|w| l.contains(w)))
            .cloned()
            .collect()
    }

    /// Sends SIGHUP and waits for the next log line with all of `words` (its outcome).
    fn reload(&self, words: &[&str]) -> Result<String> {
        let before = self.lines_with(words).len();
        let status = Command::new("kill")
            .arg("-HUP")
            .arg(self.child.id().to_string())
            .status()?;
        ensure!(status.success(), "kill -HUP failed");
        let started = Instant::now();
        loop {
            let lines = self.lines_with(words);
            if lines.len() > before {
                return Ok(lines[before].clone());
            }
            if started.elapsed() > Duration::from_secs(10) {
                bail!(
                    "no {words:?} after SIGHUP: {:?}",
                    self.log.lock().expect("log lock")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn spawn(data_dir: &Path, args: &[&str]) -> Result<(Child, Log)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_musterd"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--workers", "1"])
        .args(args)
        .env_remove("MUSTER_AUTH_FILE")
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
    Ok((child, log))
}

/// An auth file: `(principal, token)` pairs, each with `read` on groups `orders-*`.
fn auth_file(principals: &[(&str, &str)]) -> String {
    let mut text = String::new();
    for (name, token) in principals {
        text.push_str(&format!(
            "[[principals]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\n\n",
            TokenHash::of(token).to_hex()
        ));
    }
    for (name, _) in principals {
        text.push_str(&format!(
            "[[acls]]\nprincipal = \"{name}\"\nresource = \"group\"\npattern = \"orders-*\"\n\
             operations = [\"read\"]\n\n"
        ));
    }
    text
}

/// A blocking connection speaking frames.
struct Conn {
    stream: TcpStream,
    next: u32,
}

impl Conn {
    fn open(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Conn { stream, next: 1 })
    }

    fn call(&mut self, request: Request) -> Result<Response> {
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
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let mut payload = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut payload)?;
        let frame = decode_response(&payload)?;
        ensure!(
            frame.correlation_id == correlation_id,
            "answer out of order"
        );
        Ok(frame.response)
    }

    /// Says Hello with `token`; the answer's error code.
    fn hello(&mut self, token: Option<&str>) -> Result<i16> {
        match self.call(Request::Hello(HelloRequest {
            protocol_version: 1,
            client_id: "auth-test".into(),
            auth_token: token.map(str::to_owned),
        }))? {
            Response::Hello(h) => Ok(h.error_code),
            other => bail!("not a Hello answer: {other:?}"),
        }
    }

    /// A heartbeat for a member that does not exist: the error code says whether the group
    /// was reachable (anything but 30) or denied (30).
    fn heartbeat(&mut self, group: &str) -> Result<i16> {
        match self.call(Request::Heartbeat(HeartbeatRequest {
            group_id: group.into(),
            generation_id: 1,
            member_id: "nobody".into(),
            group_instance_id: None,
        }))? {
            Response::Heartbeat(h) => Ok(h.error_code),
            other => bail!("not a Heartbeat answer: {other:?}"),
        }
    }

    /// Whether the server closed the connection (EOF before a read timeout).
    fn closed_by_server(&mut self) -> Result<bool> {
        self.stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => Ok(true),
            Ok(_) => bail!("unexpected bytes after the answer"),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(true),
            Err(e) => Err(e.into()),
        }
    }
}

fn connect_with(addr: SocketAddr, token: Option<&str>) -> Result<(Conn, i16)> {
    let mut conn = Conn::open(addr)?;
    let code = conn.hello(token)?;
    Ok((conn, code))
}

const AUTH_FAILED: i16 = ErrorCode::AuthenticationFailed.code();
const GROUP_DENIED: i16 = ErrorCode::GroupAuthorizationFailed.code();

#[test]
fn a_bad_auth_file_stops_startup_with_its_line_and_reason() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("auth.toml");
    std::fs::write(
        &path,
        "[[principals]]\nname = \"a\"\n\n[[acls]]\nprincipal = \"a\"\nresource = \"queue\"\n\
         pattern = \"*\"\noperations = [\"read\"]\n",
    )?;
    let (mut child, log) = spawn(
        &dir.path().join("data"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
            "--auth-file",
            path.to_str().context("utf-8")?,
        ],
    )?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            bail!("musterd kept running with a bad auth file");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    ensure!(!status.success(), "exit status {status}");
    // The stderr reader may still be draining.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = log.lock().expect("log lock").clone();
        let refused = log
            .iter()
            .any(|l| l.contains("line 6, column") && l.contains("unknown resource \"queue\""));
        if refused {
            ensure!(
                !log.iter().any(|l| l.contains("musterd listening")),
                "it listened: {log:?}"
            );
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "no line and reason on stderr: {log:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sighup_refuses_a_broken_file_and_applies_a_good_one() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("auth.toml");
    std::fs::write(
        &path,
        auth_file(&[("alice", "alice-token"), ("bob", "bob-token")]),
    )?;
    let server = Server::start(
        &dir.path().join("data"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--auth-file",
            path.to_str().context("utf-8")?,
        ],
    )?;
    let addr = server.addr;
    assert_eq!(connect_with(addr, Some("alice-token"))?.1, 0);
    let (mut bob, code) = connect_with(addr, Some("bob-token"))?;
    assert_eq!(code, 0);
    assert_ne!(
        bob.heartbeat("orders-1")?,
        GROUP_DENIED,
        "bob reads orders-*"
    );
    assert_eq!(
        bob.heartbeat("billing-1")?,
        GROUP_DENIED,
        "but not billing-*"
    );
    let metrics = http_get(server.admin.context("admin address")?, "/metrics")?;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("muster_authorization_denials_total{resource=\"group\"} ")),
        "{metrics}"
    );

    // Broken: line 3 is not TOML. Refused with its line; the old rules stay.
    std::fs::write(&path, "[[principals]]\nname = \"alice\"\ntoken_sha256 = \n")?;
    let refused = server.reload(&["auth file refused"])?;
    assert!(refused.contains("line 3"), "{refused}");
    assert_eq!(
        connect_with(addr, Some("bob-token"))?.1,
        0,
        "bob still works"
    );
    assert_eq!(connect_with(addr, Some("carol-token"))?.1, AUTH_FAILED);
    assert_ne!(bob.heartbeat("orders-1")?, GROUP_DENIED);

    // Good: carol replaces bob.
    std::fs::write(
        &path,
        auth_file(&[("alice", "alice-token"), ("carol", "carol-token")]),
    )?;
    server.reload(&["auth file reloaded"])?;
    assert_eq!(
        connect_with(addr, Some("carol-token"))?.1,
        0,
        "the new token works"
    );
    assert_eq!(connect_with(addr, Some("alice-token"))?.1, 0);
    let (mut removed, code) = connect_with(addr, Some("bob-token"))?;
    assert_eq!(code, AUTH_FAILED, "a removed token's new Hello is refused");
    assert!(removed.closed_by_server()?, "and its connection closed");
    // Bob's open connection authenticated before the reload: it stays open, but its grants
    // are gone at its next request.
    assert_eq!(bob.heartbeat("orders-1")?, GROUP_DENIED);
    Ok(())
}

#[test]
fn an_open_server_on_a_public_address_warns_once_and_on_loopback_not() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let public = Server::start(
        &dir.path().join("public"),
        &["--listen", "0.0.0.0:0", "--admin-listen", "off"],
    )?;
    let warnings = public.lines_with(&["WARN", "docs/security.md"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("no auth file"), "{warnings:?}");
    drop(public);

    let local = Server::start(
        &dir.path().join("local"),
        &["--listen", "127.0.0.1:0", "--admin-listen", "off"],
    )?;
    let warnings = local.lines_with(&["docs/security.md"]);
    assert!(warnings.is_empty(), "{warnings:?}");

    // An auth file silences it on a public address too.
    let path = dir.path().join("auth.toml");
    std::fs::write(&path, auth_file(&[("alice", "alice-token")]))?;
    let authed = Server::start(
        &dir.path().join("authed"),
        &[
            "--listen",
            "0.0.0.0:0",
            "--admin-listen",
            "off",
            "--auth-file",
            path.to_str().context("utf-8")?,
        ],
    )?;
    let warnings = authed.lines_with(&["docs/security.md"]);
    assert!(warnings.is_empty(), "{warnings:?}");
    Ok(())
}

#[test]
fn repeated_failed_hellos_are_slowed_down_and_counted() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("auth.toml");
    std::fs::write(&path, auth_file(&[("alice", "alice-token")]))?;
    let server = Server::start(
        &dir.path().join("data"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--auth-file",
            path.to_str().context("utf-8")?,
        ],
    )?;
    let started = Instant::now();
    let mut took = Vec::new();
    for _ in 0..4 {
        let t = Instant::now();
        let (mut conn, code) = connect_with(server.addr, Some("guess"))?;
        took.push(t.elapsed());
        assert_eq!(code, AUTH_FAILED);
        assert!(conn.closed_by_server()?);
    }
    let total = started.elapsed();
    // The server spaces an address's attempts 100, 200 and 400 ms after its 1st, 2nd and 3rd
    // failures (auth/failures.rs): the 4th answer cannot come before 700 ms after the first
    // failure, however fast or slow this client is.
    assert!(total >= Duration::from_millis(700), "{took:?}");
    assert!(took[3] > took[0], "{took:?}");
    assert!(took[3] >= Duration::from_millis(200), "{took:?}");

    let admin = server.admin.context("admin address")?;
    let body = http_get(admin, "/metrics")?;
    let failures: f64 = body
        .lines()
        .filter(|l| {
            l.starts_with("muster_auth_failures_total{") && l.contains("reason=\"unknown_token\"")
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum();
    assert_eq!(failures, 4.0, "{body}");
    // A Hello without a token is counted under its own reason.
    let (_, code) = connect_with(server.addr, None)?;
    assert_eq!(code, AUTH_FAILED);
    let body = http_get(admin, "/metrics")?;
    assert!(
        body.lines()
            .any(|l| l.starts_with("muster_auth_failures_total{")
                && l.contains("reason=\"missing_token\"")),
        "{body}"
    );
    Ok(())
}

/// The body of a GET on the admin listener.
fn http_get(admin: SocketAddr, path: &str) -> Result<String> {
    let mut stream = TcpStream::connect(admin)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    ensure!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    Ok(raw.split("\r\n\r\n").nth(1).unwrap_or("").to_owned())
}
