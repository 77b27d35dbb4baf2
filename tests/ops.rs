//! Operations over the real server: /metrics moves during a rebalance, /readyz is false until
//! state is loaded, the connection limit answers TOO_MANY_CONNECTIONS, idle connections close.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::*;
use muster_coordinator::storage::{Durable, MemoryStore, Mutation, Store, StoreError, StoredState};
use muster_protocol::*;
use muster_server::admin::Readiness;

/// A minimal HTTP/1.1 GET: (status, body).
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: muster\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// Sum of every sample of `metric` whose labels contain all of `labels`.
fn sample(metrics: &str, metric: &str, labels: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(metric)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

#[tokio::test]
async fn metrics_move_during_a_rebalance() -> anyhow::Result<()> {
    let server = start_server_with(fast_config(), |o| {
        o.admin_listen = Some("127.0.0.1:0".into())
    });
    let admin = server.admin_addr().expect("admin listener runs");
    let (status, before) = http_get(admin, "/metrics")?;
    assert_eq!(status, 200);
    let rebalances = sample(&before, "muster_rebalances_total", &[]);
    let joins = sample(&before, "muster_requests_total", &["request=\"JoinGroup\""]);

    let _members = form_group(server.local_addr(), "metrics-g", 2, 10_000, 5_000).await?;

    // The per-state gauges are set by the supervisor when a group tells it of a new state,
    // which may land a moment after the SyncGroup answers (the admin listener has its own
    // thread): give them a bounded moment.
    let mut after = String::new();
    for _ in 0..100 {
        after = http_get(admin, "/metrics")?.1;
        if sample(&after, "muster_groups", &["state=\"Stable\""]) >= 1.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        sample(&after, "muster_rebalances_total", &[]) >= rebalances + 1.0,
        "{after}"
    );
    assert!(sample(&after, "muster_requests_total", &["request=\"JoinGroup\""]) >= joins + 4.0);
    assert!(
        sample(
            &after,
            "muster_request_duration_seconds_count",
            &["request=\"SyncGroup\""]
        ) >= 2.0
    );
    assert!(sample(&after, "muster_groups", &["state=\"Stable\""]) >= 1.0);
    assert!(sample(&after, "muster_members", &[]) >= 2.0);
    assert!(sample(&after, "muster_connections_open", &[]) >= 2.0);
    assert!(after.contains("# HELP muster_rebalances_total"));
    // Cardinality stays bounded: no member or group ids in labels.
    assert!(
        !after.contains("metrics-g"),
        "a group id leaked into a label"
    );
    let (status, body) = http_get(admin, "/healthz")?;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    assert_eq!(http_get(admin, "/nope")?.0, 404);
    Ok(())
}

/// A store whose `load` waits until the test lets it go.
struct GatedStore {
    inner: MemoryStore,
    gate: Mutex<mpsc::Receiver<()>>,
}

impl Store for GatedStore {
    fn load(&self) -> Result<StoredState, StoreError> {
        let _ = self.gate.lock().expect("gate").recv();
        self.inner.load()
    }
    fn apply(&self, batch: Vec<Mutation>) -> Durable {
        self.inner.apply(batch)
    }
}

#[test]
fn readyz_is_false_until_state_is_loaded() -> anyhow::Result<()> {
    let (open_gate, gate) = mpsc::channel();
    let readiness = Readiness::default();
    let port = free_port()?;
    let admin: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let ready = readiness.clone();
    let server = std::thread::spawn(move || {
        let store = GatedStore {
            inner: MemoryStore::new(),
            gate: Mutex::new(gate),
        };
        let mut options = muster_server::ServerOptions::new("127.0.0.1:0", Arc::new(store));
        options.admin_listen = Some(admin.to_string());
        options.readiness = ready;
        muster_server::spawn(options)
    });
    // The admin listener answers while the state is still loading.
    let mut status = 0;
    for _ in 0..200 {
        if let Ok((s, _)) = http_get(admin, "/readyz") {
            status = s;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(status, 503, "not ready while loading");
    assert_eq!(http_get(admin, "/healthz")?.0, 200, "alive while loading");
    open_gate.send(())?;
    let server = server.join().expect("server thread")?;
    assert_eq!(http_get(admin, "/readyz")?.0, 200, "ready once loaded");
    assert!(readiness.get());
    server.stop();
    assert!(!readiness.get(), "not ready once shut down");
    Ok(())
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[tokio::test]
async fn connections_over_the_limit_are_refused_with_too_many_connections() -> anyhow::Result<()> {
    let server = start_server_with(fast_config(), |o| o.max_connections = 2);
    let addr = server.local_addr();
    let first = Conn::connect(addr, "one").await?;
    let _second = Conn::connect(addr, "two").await?;
    let third = Conn::connect_raw(addr).await?;
    third.closed().await?;
    let received = third.received();
    assert_eq!(
        received.len(),
        1,
        "exactly one answer before the close: {received:?}"
    );
    let (correlation_id, refused) = &received[0];
    assert_eq!(*correlation_id, 0);
    assert_eq!(
        refused.error_code(),
        ErrorCode::TooManyConnections.code(),
        "{refused:?}"
    );
    // A slot frees when a connection closes.
    drop(first);
    let mut again = None;
    for _ in 0..100 {
        if let Ok(conn) = Conn::connect(addr, "again").await {
            again = Some(conn);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(again.is_some(), "a freed slot admits a new connection");
    Ok(())
}

#[tokio::test]
async fn idle_connections_close_but_held_requests_keep_theirs_open() -> anyhow::Result<()> {
    let config = muster_coordinator::GroupConfig {
        initial_rebalance_delay_ms: 5_000,
        ..fast_config()
    };
    let server = start_server_with(config, |o| {
        o.idle_timeout = Some(Duration::from_millis(150))
    });
    let addr = server.local_addr();
    let idle = Conn::connect(addr, "idle").await?;
    let mut busy =
        Member::pending(Conn::connect(addr, "busy").await?, "idle-g", 10_000, 10_000).await?;
    let held = busy.send_join().await?;
    idle.closed().await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !busy.conn.is_closed(),
        "a connection with a held JoinGroup is not idle"
    );
    drop(held);
    Ok(())
}
